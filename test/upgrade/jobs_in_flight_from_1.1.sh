#!/usr/bin/env bash
# The upgrade from 1.1 (commit 5b86380) with jobs in every state: jobs_in_flight.sh, from 1.1.
JB_FROM=1.1 exec bash "$(dirname "$0")/jobs_in_flight.sh"
