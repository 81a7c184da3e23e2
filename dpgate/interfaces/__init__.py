"""How people use dpgate: the DB-API, the command line, the shell, the demo.

An analyst's path goes through ``dpgate.gateway.Gateway``, the owner's commands
(``owner_commands``) through ``dpgate.Owner``; nothing here plans or perturbs.
"""
