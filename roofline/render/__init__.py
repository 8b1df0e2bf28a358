"""Views of a report: text and HTML, the SVG chart, CSV and DataFrame rows, the Chrome trace, the colour table. They
compute nothing an analysis owns."""
