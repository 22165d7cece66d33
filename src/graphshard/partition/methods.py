"""The names of the assignment methods (a module without imports, for option parsers)."""

METHODS = ("metis", "random", "kaminpar", "stream")
