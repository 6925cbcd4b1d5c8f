"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers."""
