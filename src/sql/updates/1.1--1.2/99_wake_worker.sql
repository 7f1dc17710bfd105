
-- Keep this part last.
-- Wakes the drain worker when this update commits: a worker running the 1.2 library against 1.1
-- SQL waits for this update, and a statement on jobbuf.queues (its trigger) is what tells it.
UPDATE jobbuf.queues SET paused = paused WHERE false;
