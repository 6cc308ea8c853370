"""The catalog of tables and namespaces: create, drop, register, rename, list and migrate.

Each command has one module (`create`, `drop`, `rename`, `listing`, `migrate`); `rows` is the
vocabulary of a `__manifest` row, `dependents` the rail that keeps a table directory another
table reads from in place.
"""
