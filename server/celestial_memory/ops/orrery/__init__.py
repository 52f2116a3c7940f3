"""The orrery's static page (index.html, orrery.js, orrery.css), served by ops/http.py."""
