"""Configuration, the ground floor: the run config schema (validated on load), the shipped presets, the
stage specs of multi-stage recipes and the config reference printed by ``cselab config show``."""
