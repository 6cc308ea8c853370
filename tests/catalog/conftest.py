"""Catalog commands and their safety: create, drop, rename, register, migrate-v1, check, move
safety, containment, bad input, interoperability with the reference namespace.

No fixture is used by this folder alone: roots and the moto server are in the root conftest,
each module's own fixtures in the module."""
