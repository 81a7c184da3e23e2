"""A JDBC client for the server tests (run as a child process: the JVM stays out of the test's process).

``python jdbcclient.py JAR PORT USER PASSWORD SQL`` prints one JSON object: the server's product
name and version, the tables and views ``DatabaseMetaData.getTables`` lists, the columns
``getColumns`` gives for the first table, and the rows of ``SQL`` as text.
"""

from __future__ import annotations

import json
import sys

import jpype
import jpype.imports


def main() -> None:
    jar, port, user, password, sql = sys.argv[1:6]
    jpype.startJVM(classpath=[jar])
    from java.sql import DriverManager  # noqa: E402  (after the JVM starts)
    from java.util import Properties

    props = Properties()
    props.setProperty("user", user)
    props.setProperty("password", password)
    con = DriverManager.getConnection(f"jdbc:postgresql://127.0.0.1:{port}/dpgate", props)
    md = con.getMetaData()
    out = {"product": str(md.getDatabaseProductName()), "version": str(md.getDatabaseProductVersion())}
    rs = md.getTables(None, None, "%", ["TABLE", "VIEW"])
    out["tables"] = []
    while rs.next():
        out["tables"].append([str(rs.getString("TABLE_SCHEM")), str(rs.getString("TABLE_NAME")), str(rs.getString("TABLE_TYPE"))])
    first = out["tables"][0][1] if out["tables"] else ""
    rs = md.getColumns(None, None, first, "%")
    out["columns"] = []
    while rs.next():
        out["columns"].append([str(rs.getString("COLUMN_NAME")), str(rs.getString("TYPE_NAME")), int(rs.getInt("DATA_TYPE"))])
    rs = con.createStatement().executeQuery(sql)
    width = rs.getMetaData().getColumnCount()
    out["rows"] = []
    while rs.next():
        out["rows"].append([str(rs.getString(i + 1)) for i in range(width)])
    con.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
