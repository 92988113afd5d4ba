from legion.cli import entry

entry()
