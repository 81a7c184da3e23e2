"""How people use dpgate: the DB-API, the command line, the shell, the demo.

Everything here goes through ``dpgate.gateway.Gateway``; nothing here plans or perturbs.
"""
