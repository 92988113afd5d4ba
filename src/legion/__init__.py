"""Legion: runs a swarm of coding agents through your issue tracker."""

__version__ = "0.1.0"
