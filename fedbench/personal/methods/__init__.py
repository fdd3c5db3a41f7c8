"""The personalised methods, one module each, registered in fedbench.algorithms' registry
(imported by fedbench.algorithms, so that `fedbench list algorithms` shows them)."""
