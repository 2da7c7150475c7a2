"""One module per command (as asv keeps its commands): each declares its flags (``add_parser``) and does its work
(``command``); :mod:`harness.cli.main` assembles the parser and turns what a command returns into the exit status."""
