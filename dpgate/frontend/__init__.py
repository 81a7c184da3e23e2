"""Front end: SQL text to a classified statement.

``dialect`` parses (dpgate's DuckDB-based sqlglot dialect), ``nodes`` defines dpgate's own
statements, ``settings`` the DP options and session settings, ``classify`` decides what a
statement is and which tables it reads. Nothing here reads a row.
"""
