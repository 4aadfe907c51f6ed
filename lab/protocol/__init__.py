"""The research protocols of the methods (shell drivers of ``cselab train``, ``seeds``, ``ablate``, ``analyze``)."""
