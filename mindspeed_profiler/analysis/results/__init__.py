"""What the analysis gives: summary.json (outputs), analysis.db (sqlite_export), report.html
(report/), the terminal tables (console) and RunAnalysis (facade)."""
