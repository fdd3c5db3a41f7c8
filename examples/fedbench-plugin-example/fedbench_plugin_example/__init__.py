"""An example fedbench plugin: the Signum client rule (fedbench_plugin_example.signum)."""
