#!/usr/bin/env bash
# The upgrade from 1.2 (commit 6738a34) with jobs in every state: jobs_in_flight.sh, from 1.2.
JB_FROM=1.2 exec bash "$(dirname "$0")/jobs_in_flight.sh"
