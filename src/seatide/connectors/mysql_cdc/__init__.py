"""MySQL-CDC: a consistent-enough snapshot of MySQL/MariaDB tables, then their binlog changes."""
