"""The report: its model, and the table, JSON, JUnit and markdown renderers."""
