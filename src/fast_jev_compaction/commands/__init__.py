"""Sub-commands of the ``fast-jev`` CLI, one module each; heavy imports stay inside ``run``."""
