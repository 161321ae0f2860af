"""The admin console (Gradio): one small module per tab; handlers call admin services, and
each one checks the admin role first (``ui.session.require_admin``)."""
