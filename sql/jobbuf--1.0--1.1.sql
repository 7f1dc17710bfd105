-- jobbuf 1.0 -> 1.1: ALTER EXTENSION jobbuf UPDATE. Every change 1.1 makes to the extension's
-- SQL is made here as well as in src/sql/ (which builds jobbuf--1.1.sql); test/upgrade checks that
-- an updated 1.0 and a fresh 1.1 have the same catalog, and that jobs in every state survive.
\echo Use "ALTER EXTENSION jobbuf UPDATE TO '1.1'" to load this file. \quit

-- Wakes the drain worker when this update commits: a worker running the 1.1 library against 1.0
-- SQL waits for this update, and a statement on jobbuf.queues (its trigger) is what tells it.
UPDATE jobbuf.queues SET paused = paused WHERE false;
