"""Http source and sink (SeaTunnel's ``Http``): rows read from, and posted to, an HTTP endpoint."""
