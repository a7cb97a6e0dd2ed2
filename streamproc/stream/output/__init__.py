"""The one path out: output topics, their size limit, and dead letters."""
