"""`bench view`: a local web app over cassettes and scores (docs/view.md). The scorer never imports this package."""
