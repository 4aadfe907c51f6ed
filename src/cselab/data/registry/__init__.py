"""What ``cselab data fetch`` obtains through the package registries: the pinned sources, their download and
verification, and one builder per target."""
