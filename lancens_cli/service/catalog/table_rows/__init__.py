"""Row changes of one table that is no partition table: `delete ID`, `update ID`, `merge ID`."""
