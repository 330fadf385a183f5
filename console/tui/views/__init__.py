"""One screen per view; each draws from the read model and redraws only while it is the visible one."""
