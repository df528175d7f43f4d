"""The jars SeaTide puts on every driver JVM's own class path.

Its own module because two parts need the list: the session that starts the JVM with it
(``session.py``), and the class archive whose key covers it (``class_archive.py``), which
the session itself uses; with the list in ``session.py`` the two imported each other.
"""

# JDBC drivers from Debian (libpostgresql-jdbc-java, libmariadb-java). On the JVM's own class
# path, java.sql.DriverManager finds them on the driver as well as in executors; spark.jars
# would reach executors only through a class loader DriverManager does not consult.
JDBC_JARS = ("/usr/share/java/postgresql.jar", "/usr/share/java/mariadb-java-client.jar")
