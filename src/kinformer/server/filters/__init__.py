"""The request filters in front of every handler: the handler chain, flow control, limits, host check."""
