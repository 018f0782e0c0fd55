"""The run model both sides share, stdlib only."""
