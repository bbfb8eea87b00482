"""`herd mcp`: the fleet as MCP tools and resources for an orchestrating agent."""
