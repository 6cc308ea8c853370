"""The command-line surface: every command's behaviour, layout, output contract, progress,
terminal views, configuration, hostile input, generated docs, packaging and code health.

No fixture is used by this folder alone: roots are in the root conftest, each module's own
fixtures in the module."""
