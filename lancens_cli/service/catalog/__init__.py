"""The catalog of tables and namespaces: create, drop, register, rename, list and migrate.

Entry point: the module of each command (`create`, `drop` with register and deregister,
`rename`, `listing` for `ls`, `migrate` for `migrate-v1`); `rows` is the
vocabulary of a `__manifest` row, `dependents` the rail that keeps a table directory another
table reads from in place.
"""
