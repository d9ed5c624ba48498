"""The static policy over candidate source: AST checks run in the trusted parent before the
candidate executes (README.md lists the modules)."""
