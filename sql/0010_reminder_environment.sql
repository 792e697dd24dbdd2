-- Reminders are computed per store environment (a sandbox pass has its own
-- coverage and reminders), and the webhook says which one it is about.
ALTER TABLE reminders ADD COLUMN environment text NOT NULL DEFAULT 'Production'
    CHECK (environment IN ('Production', 'Sandbox'));
