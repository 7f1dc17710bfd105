// Postgres regime: de-duplicated problem logging for the worker (see problem_log.h).
#include "pg_includes.h"

#include "config/shared_state.h"
#include "status/problem_log.h"

extern "C" {
#include "utils/timestamp.h"
}

namespace {

constexpr int kRepeatAfterMs = 60 * 1000;

struct ProblemState {
    bool active;
    char text[kStatusErrorLen];
    TimestampTz logged_at;
};

ProblemState problems[kProblemKinds];

}  // namespace

void report_problem(ProblemKind kind, const char* message)
{
    ProblemState& problem = problems[static_cast<int>(kind)];
    TimestampTz now = GetCurrentTimestamp();
    // New problem: log it. Same kind, different text while it lasts (a refused connection that
    // turns into a timeout): log again, but at most once a minute.
    bool changed = problem.active && strncmp(problem.text, message, kStatusErrorLen - 1) != 0;
    if (!problem.active || (changed && TimestampDifferenceExceeds(problem.logged_at, now, kRepeatAfterMs))) {
        ereport(WARNING, (errmsg("jobbuf: %s", message)));
        strlcpy(problem.text, message, sizeof(problem.text));
        problem.logged_at = now;
    }
    problem.active = true;
    shared_state_set_error(message);
}

void report_recovered(ProblemKind kind, const char* message)
{
    ProblemState& problem = problems[static_cast<int>(kind)];
    if (!problem.active)
        return;
    problem.active = false;
    ereport(LOG, (errmsg("jobbuf: %s", message)));
    show_lasting_problem();
}

void show_lasting_problem(void)
{
    const char* lasting = "";
    for (const ProblemState& other : problems)
        if (other.active)
            lasting = other.text;
    shared_state_show_error(lasting);
}
