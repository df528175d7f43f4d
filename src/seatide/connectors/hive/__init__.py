"""Hive sink and source: tables of a Hive metastore (thrift), their files written and read by Spark."""
