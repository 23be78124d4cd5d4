"""HTML reports: studies, harm, compare, search and atlas pages."""
