"""Random Spark SQL, answered by Apache Spark and by bucketsql on the same rows, must agree.

Usage: spark_answers.py PORT SEED QUERIES WORKDIR [--replays FILE] [--known FILE] [--record]
                        [--only INDEX] [--verbose]

Creates the tables of spark_answer_grammar.py with the same DDL and INSERTs in a local Spark
(pyspark, Spark's default settings: ANSI mode on) and in the bucketsql server on PORT, then
runs every query of the replay file and QUERIES random ones drawn from SEED. For each query it
compares, in this order:
- errors: where Spark raises, bucketsql must raise too, with a SQLSTATE of the same class (which
  row fails first, and so which data error comes out, depends on the order rows are read in);
- answers: where Spark answers, bucketsql must answer;
- column types: each result column declared as the PostgreSQL type Spark's type is sent as
  (DECIMAL precision and scale too);
- rows, as multisets: numbers within a relative 1e-9, NaN equal to NaN.

Spark's answer is the expected one; nothing is taken from bucketsql's own output. A failing
query is shrunk (subexpressions replaced by smaller ones while it fails the same way) and shown
shrunk. A failure that a line of the known-differences file describes (what failed, and a
regular expression over the query) is counted and listed but does not fail the run: each such
line names the section of docs/spark-differences.md that documents it. `--record` appends new
shrunk failures to the replay file. Exits 1 on any other failure.
"""
import argparse
import datetime
import logging
import math
import os
import re
import shutil
import sys
import time
from collections import Counter
from decimal import Decimal

import psycopg

from spark_answer_grammar import TABLES, Generator, create_statement, insert_statements

REL_TOL = 1e-9
# The state of an error that is no Spark error: pyspark failing to read Spark's answer.
UNREADABLE = 'unreadable'
FLOAT_TOL = 1e-6
SHRINK_ATTEMPTS = 80

os.environ['SPARK_LOCAL_IP'] = '127.0.0.1'
# pyspark turns TIMESTAMP values into datetimes in the process's time zone.
os.environ['TZ'] = 'UTC'
time.tzset()

# PostgreSQL type OIDs each Spark type may be sent as.
SCALAR_OIDS = {
    'ByteType': {21}, 'ShortType': {21}, 'IntegerType': {23}, 'LongType': {20}, 'FloatType': {700},
    'DoubleType': {701}, 'DecimalType': {1700}, 'StringType': {25, 1043}, 'VarcharType': {25, 1043},
    'CharType': {25, 1042, 1043}, 'DateType': {1082}, 'TimestampType': {1184}, 'TimestampNTZType': {1114},
    'BooleanType': {16}, 'BinaryType': {17}, 'DayTimeIntervalType': {1186}, 'YearMonthIntervalType': {1186},
    'MapType': {114}, 'StructType': {114},
}
ARRAY_OIDS = {21: 1005, 23: 1007, 20: 1016, 700: 1021, 701: 1022, 1700: 1231, 25: 1009, 1043: 1015, 1082: 1182,
              1184: 1185, 1114: 1115, 16: 1000, 17: 1001}


def spark_session(workdir):
    from pyspark.sql import SparkSession
    # Spark's catalog lives as long as its process; the files of the last run's tables would
    # stand in the way of this run's.
    warehouse = os.path.join(workdir, 'spark-warehouse')
    shutil.rmtree(warehouse, ignore_errors=True)
    spark = (SparkSession.builder.master('local[2]').appName('bucketsql-answers')
             .config('spark.ui.enabled', 'false')
             .config('spark.driver.memory', '1g')
             .config('spark.sql.session.timeZone', 'UTC')
             .config('spark.sql.warehouse.dir', warehouse)
             # Fewer tasks per query; the answers do not depend on it.
             .config('spark.sql.shuffle.partitions', '4')
             .getOrCreate())
    spark.sparkContext.setLogLevel('OFF')
    logging.getLogger('SQLQueryContextLogger').setLevel(logging.CRITICAL)
    logging.getLogger('py4j').setLevel(logging.CRITICAL)
    return spark


class Outcome:
    """What one system made of a query: rows with their column types, or an error."""

    def __init__(self, rows=None, types=None, state=None, message=None):
        self.rows, self.types, self.state, self.message = rows, types, state, message

    @property
    def failed(self):
        return self.state is not None


def spark_outcome(spark, sql):
    try:
        frame = spark.sql(sql)
        return Outcome(rows=[tuple(r) for r in frame.collect()], types=[f.dataType for f in frame.schema.fields])
    except Exception as e:  # noqa: BLE001 - every Spark error is an answer to compare
        state = e.getSqlState() if hasattr(e, 'getSqlState') else None
        return Outcome(state=state or UNREADABLE, message=str(e).split('\n')[0][:300])


def ours_outcome(conn, sql):
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            described = [(c.type_code, c.precision, c.scale) for c in cur.description]
            return Outcome(rows=cur.fetchall(), types=described)
    except psycopg.Error as e:
        return Outcome(state=e.sqlstate or 'XXOUR', message=str(e).split('\n')[0][:300])


def expected_oids(spark_type):
    name = type(spark_type).__name__
    if name == 'ArrayType':
        element = expected_oids(spark_type.elementType)
        return {ARRAY_OIDS[o] for o in element if o in ARRAY_OIDS}
    if name == 'NullType':
        return None
    return SCALAR_OIDS.get(name, set())


def type_difference(spark_types, ours):
    for n, (theirs, (oid, precision, scale)) in enumerate(zip(spark_types, ours)):
        oids = expected_oids(theirs)
        if oids is not None and oid not in oids:
            return f'column {n + 1}: Spark {theirs.simpleString()}, ours OID {oid}'
        if type(theirs).__name__ == 'DecimalType' and (precision, scale) != (theirs.precision, theirs.scale):
            return f'column {n + 1}: Spark {theirs.simpleString()}, ours numeric({precision},{scale})'
    return None


def norm(v):
    if isinstance(v, float):
        return ('nan',) if math.isnan(v) else v
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, (list, tuple)):
        return tuple(norm(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((norm(k), norm(x)) for k, x in v.items()))
    return v


def sort_key(row):
    def one(v):
        if isinstance(v, (float, Decimal, int)) and not isinstance(v, bool):
            return (1, f'{float(v):.6g}')
        return (2, repr(v))
    return tuple(one(v) for v in row)


def same_value(a, b, tolerance=REL_TOL):
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_value(x, y, tolerance) for x, y in zip(a, b))
    numbers = (int, float, Decimal)
    if isinstance(a, bool) or isinstance(b, bool) or not (isinstance(a, numbers) and isinstance(b, numbers)):
        return type(a) is type(b) and a == b
    # Spark prints -0.0 as it is: a zero's sign is part of the answer.
    if isinstance(a, float) and isinstance(b, float) and a == 0 and b == 0:
        return math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=tolerance, abs_tol=1e-300) or float(a) == float(b)
    return a == b


def row_difference(theirs, ours, types):
    theirs = sorted((tuple(norm(v) for v in r) for r in theirs), key=sort_key)
    ours = sorted((tuple(norm(v) for v in r) for r in ours), key=sort_key)
    if len(theirs) != len(ours):
        return f'{len(theirs)} rows from Spark, {len(ours)} here: Spark {theirs[:4]}, ours {ours[:4]}'
    # A FLOAT comes as the digits that read back as it, not as the DOUBLE pyspark makes of it.
    tolerances = [FLOAT_TOL if type(t).__name__ == 'FloatType' else REL_TOL for t in types]
    for a, b in zip(theirs, ours):
        if not all(same_value(x, y, tol) for x, y, tol in zip(a, b, tolerances)) or len(a) != len(b):
            return f'Spark {a}, ours {b}'
    return None


def difference(theirs, ours):
    """(what failed, detail), or None where the two agree or Spark's answer could not be read."""
    if theirs.state == UNREADABLE:
        return None
    if theirs.failed and not ours.failed:
        return 'missed-error', f'Spark raised {theirs.state}: {theirs.message}'
    if theirs.failed:
        if ours.state[:2] == theirs.state[:2]:
            return None
        return 'sqlstate', f'Spark {theirs.state} ({theirs.message}); ours {ours.state} ({ours.message})'
    if ours.failed:
        return 'error', f'ours {ours.state}: {ours.message}'
    detail = type_difference(theirs.types, ours.types)
    if detail:
        return 'types', detail
    detail = row_difference(theirs.rows, ours.rows, theirs.types)
    return ('rows', detail) if detail else None


def load_known(path):
    known = []
    if not path:
        return known
    for line in open(path, encoding='utf-8'):
        if line.strip() and not line.startswith('#'):
            kind, pattern, section = line.rstrip('\n').split('\t')
            known.append((kind, re.compile(pattern, re.I), section))
    return known


def known_section(known, kind, sql):
    for k, pattern, section in known:
        if k in (kind, '*') and pattern.search(sql):
            return section
    return None


def load_replays(path):
    if not path or not os.path.exists(path):
        return []
    return [line.rstrip('\n').split('\t', 1) for line in open(path, encoding='utf-8')
            if line.strip() and not line.startswith('#')]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('port', type=int)
    parser.add_argument('seed')
    parser.add_argument('queries', type=int)
    parser.add_argument('workdir')
    parser.add_argument('--replays')
    parser.add_argument('--known')
    parser.add_argument('--record', action='store_true')
    parser.add_argument('--only', type=int)
    parser.add_argument('--verbose', action='store_true')
    parser.add_argument('--legacy', action='store_true', help="compare under spark.sql.ansi.enabled = false")
    args = parser.parse_args()

    started = time.monotonic()
    spark = spark_session(args.workdir)
    conn = psycopg.connect(host='127.0.0.1', port=args.port, user='postgres', dbname='postgres', autocommit=True)
    for table in TABLES:
        for statement in [f'DROP TABLE IF EXISTS {table}', create_statement(table),
                          insert_statements(args.seed, table)]:
            spark.sql(statement)
            conn.execute(statement)
        loaded = f'SELECT * FROM {table}'
        problem = difference(spark_outcome(spark, loaded), ours_outcome(conn, loaded))
        if problem:
            sys.exit(f'table {table} loads differently: {problem}')
    print(f'loaded {len(TABLES)} tables in {time.monotonic() - started:.0f}s', flush=True)
    if args.legacy:
        spark.conf.set('spark.sql.ansi.enabled', 'false')
        conn.execute('SET spark.sql.ansi.enabled = false')

    known = load_known(args.known)
    cases = [('replay', family, None, sql) for family, sql in load_replays(args.replays)]
    for i in range(args.queries):
        if args.only is not None and i != args.only:
            continue
        query = Generator(f'{args.seed}/{i}').query()
        cases.append((f'#{i}', query.family, query, query.sql()))

    tally = Counter()
    by_family = Counter()
    unknown, known_seen = [], Counter()
    for name, family, query, sql in cases:
        theirs = spark_outcome(spark, sql)
        by_family[family] += 1
        if theirs.state == UNREADABLE:
            # Spark answered, but pyspark could not turn a value into Python's (a year before 1).
            tally['unreadable'] += 1
            print(f'not compared {name} {family}: {sql}\n    {theirs.message}')
            continue
        problem = difference(theirs, ours_outcome(conn, sql))
        tally['spark-error' if theirs.failed else 'spark-rows'] += 1
        if not problem:
            if args.verbose:
                print(f'ok {name} {family}: {sql}')
            continue
        kind, detail = problem
        # A known difference is not shrunk: shrinking costs a Spark query per attempt.
        section = known_section(known, kind, sql)
        if query is not None and not section:
            query, (kind, detail) = shrink(spark, conn, query, kind, detail)
            sql = query.sql()
            section = known_section(known, kind, sql)
        if section:
            known_seen[section] += 1
            if args.verbose:
                print(f'known ({section}) {name} {family} {kind}: {sql}\n    {detail}')
            continue
        unknown.append((name, family, kind, sql, detail))
        print(f'FAIL {name} {family} {kind}: {sql}\n    {detail}', flush=True)
        if args.record and query is not None:
            with open(args.replays, 'a', encoding='utf-8') as out:
                out.write(f'{family}\t{sql}\n')

    print(f'\n{len(cases)} queries ({tally["spark-rows"]} answered by Spark, {tally["spark-error"]} refused, '
          f'{tally["unreadable"]} with answers pyspark could not read) '
          f'in {time.monotonic() - started:.0f}s; families: {dict(sorted(by_family.items()))}')
    for section, count in known_seen.most_common():
        print(f'known difference, {count} queries: {section}')
    kinds = Counter((family, kind) for _, family, kind, _, _ in unknown)
    for (family, kind), count in sorted(kinds.items()):
        print(f'{count:4} {family} {kind}')
    print(f'{len(unknown)} differences from Spark not known')
    sys.exit(1 if unknown else 0)


def shrink(spark, conn, query, kind, detail):
    """The smallest query found that still fails as `kind`, with its detail."""
    attempts = 0
    progress = True
    while progress and attempts < SHRINK_ATTEMPTS:
        progress = False
        for candidate in query.shrunk():
            attempts += 1
            if attempts > SHRINK_ATTEMPTS:
                break
            sql = candidate.sql()
            problem = difference(spark_outcome(spark, sql), ours_outcome(conn, sql))
            if problem and problem[0] == kind:
                query, detail = candidate, problem[1]
                progress = True
                break
    return query, (kind, detail)


if __name__ == '__main__':
    main()
