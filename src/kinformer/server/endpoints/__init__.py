"""The resource API's endpoints: routing, reads, writes, watch, bodies, responses, tables, discovery."""
