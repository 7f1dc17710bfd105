# jobbuf: PGXS build of the extension (C++17), plus the project's own targets:
#   make demo   builds, installs and shows one committed job running in each framework's consumer
#   make test   every test suite against a private Postgres cluster and a private redis-server,
#               on PostgreSQL 15 here and on 17, 18 and 19 in Debian roots (PG=<major> for one)
#   make bench  the benchmark table (see bench/README.md); PG="15 17 18": drain and latency on
#               each of those majors, one table

EXTENSION   = jobbuf
MODULE_big  = jobbuf
# Versions: the install scripts of 1.0 (commit 26da9a3), 1.1 (commit 5b86380) and 1.2 (commit
# 6738a34) are frozen as they shipped; 1.3 is built from src/sql/ and reached from 1.2 by the
# hand-written update script sql/jobbuf--1.2--1.3.sql.
# test/upgrade checks that a fresh install and an update give one catalog.
DATA        = sql/jobbuf--1.0.sql sql/jobbuf--1.0--1.1.sql sql/jobbuf--1.1.sql sql/jobbuf--1.1--1.2.sql \
              sql/jobbuf--1.2.sql sql/jobbuf--1.2--1.3.sql
DATA_built  = sql/jobbuf--1.3.sql
PGFILEDESC  = "jobbuf - transactionally staged jobs drained to Redis"

# The Postgres regime's rooms (docs/internals/architecture.md draws them); src/redis/ is the pure C++ regime.
PG_ROOMS      = hooks config metadata support staging launcher drain delivery rotation census status worker schedules
PG_SOURCES    = $(sort $(wildcard src/*.cpp $(PG_ROOMS:%=src/%/*.cpp)))
# The pure C++ rooms: src/redis/ (the Redis protocol) and src/cron/ (cron texts and their ticks).
PURE_SOURCES  = $(sort $(wildcard src/redis/*.cpp src/redis/*/*.cpp src/cron/*.cpp))
OBJS          = $(PG_SOURCES:.cpp=.o) $(PURE_SOURCES:.cpp=.o)
SQL_PARTS     = $(sort $(wildcard src/sql/*.sql))

PG_CPPFLAGS = -Isrc
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Werror -Wno-register -Wno-missing-field-initializers \
              -Wno-unused-parameter -Wno-cast-function-type
SHLIB_LINK  = -lhiredis -lssl -lcrypto -lstdc++

# pg_regress suites for the SQL surface (test/regress/sql/<name>.sql, test/regress/expected/<name>.out).
# make installcheck is safe on a real server: setup points the regression database's worker at
# no Redis before the extension exists there, teardown drops the database.
REGRESS      = setup queues staging validation schedules teardown
REGRESS_OPTS = --inputdir=test/regress --outputdir=test/regress
EXTRA_CLEAN  = test/regress/results test/regress/regression.diffs test/regress/regression.out

# Debian's PG15 builds LLVM bitcode with clang and without PG_CXXFLAGS; jobbuf does not JIT-inline.
override with_llvm = no

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

sql/jobbuf--1.3.sql: $(SQL_PARTS)
	cat $(SQL_PARTS) > $@

$(OBJS): $(wildcard src/*.h $(PG_ROOMS:%=src/%/*.h) src/redis/*.h src/redis/*/*.h src/cron/*.h)

.PHONY: deps demo test test-unit test-faults bench print-regress package-check format
deps:
	bash scripts/install-deps.sh

# make demo KEEP=1 leaves its servers running; it installs no npm package but the BullMQ Worker's.
demo:
	bash scripts/install-deps.sh --system
	KEEP=$(KEEP) bash scripts/demo.sh

# make test: every suite on the host's PostgreSQL 15, then test/platforms.sh (17, 18, 19, Valkey 8:
# docs/internals/testing.md). make test PG=15 runs the host's part only; PG=17, PG=18, PG=19 or PG=valkey8
# every suite in that part's Debian root.
test: deps
ifeq ($(PG),)
	@started=$$(date +%s); status=0; failed=$$(mktemp); \
	JB_FAILED_FILE=$$failed bash test/run.sh || status=1; \
	echo "##### part 15 took $$(( $$(date +%s) - started )) s"; \
	bash test/platforms.sh || status=1; \
	[ ! -s $$failed ] || echo "##### FAILED on part 15: $$(cat $$failed)"; rm -f $$failed; \
	echo "##### make test took $$(( $$(date +%s) - started )) s"; exit $$status
else ifeq ($(PG),15)
	bash test/run.sh
else
	bash test/platforms.sh $(PG)
endif

test-unit: deps
	bash test/run.sh unit

test-faults: deps
	bash test/run.sh faults

bench: deps
ifeq ($(PG),)
	bash bench/run.sh
else
	bash bench/majors.sh $(PG)
endif

# Builds postgresql-<major>-jobbuf (debian/, pg_buildext) for 15, 17, 18 and 19 and checks each .deb
# in a clean root of its Debian release (docs/platforms.md); not part of make test.
package-check:
	bash scripts/package-check.sh

print-regress:
	@echo $(REGRESS)

# The house style (.clang-format; clang-format from Debian's clang-format package) on every C++
# file of the extension and its unit tests.
format:
	clang-format -i $$(git ls-files 'src/*.cpp' 'src/*.h' 'test/unit/*.cpp' 'test/unit/*.h')
