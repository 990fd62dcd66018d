"""The tables of random_queries.py: one row set per table, drawn from a seed, loaded into
bucketsql (over the wire, with COPY and multi-row INSERTs) and into DuckDB.

Every table has the same columns, so the grammar can put any table anywhere; they differ in
layout (bucketed alike, with a bucket count that coalesces, with one that does not, sorted,
several files per bucket, partitioned, on two columns, on another column, not bucketed) and in
their rows. Keys have NULLs, duplicates, one hot value and negatives; `j` shares most of its
values with `k` so that `k = j` joins match; doubles are multiples of 0.25, so sums are exact.
"""
import datetime

# Column names and the grammar's types; SQL types per engine in SQL_TYPES.
BASE_COLUMNS = [('id', 'bigint'), ('k', 'int'), ('j', 'bigint'), ('s', 'str'), ('v', 'double'), ('d', 'date'), ('p', 'int')]
SQL_TYPES = {'int': ('INT', 'INT'), 'bigint': ('BIGINT', 'BIGINT'), 'str': ('STRING', 'VARCHAR'),
             'double': ('DOUBLE', 'DOUBLE'), 'date': ('DATE', 'DATE')}

# name -> (bucketsql layout clauses, how rows are written: 'copy' or n INSERT statements)
TABLES = {
    'bucketed': ('CLUSTERED BY (k) INTO 8 BUCKETS', 'copy'),
    'coalescable': ('CLUSTERED BY (k) INTO 4 BUCKETS', 'copy'),
    'mismatched': ('CLUSTERED BY (k) INTO 6 BUCKETS', 'copy'),
    'sorted': ('CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS', 'copy'),
    'multifile': ('CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS', 4),
    'partitioned': ('PARTITIONED BY (p) CLUSTERED BY (k) INTO 8 BUCKETS', 'copy'),
    'twokey': ('CLUSTERED BY (k, j) INTO 8 BUCKETS', 'copy'),
    'jbucketed': ('CLUSTERED BY (j) INTO 8 BUCKETS', 2),
    'sbucketed': ('CLUSTERED BY (s) INTO 5 BUCKETS', 'copy'),
    'plain': ('', 'copy'),
}

STRINGS = ['', 'a', 'b', 'c', 'ab', 'abc', 'A', 'B', 'Zed', 'x', 'xy', 'xyz', 'a b', 'é', 'ü', 'hello', 'world',
           'foo', 'bar', 'baz', 'qux', 'zzz', '0', '10', '9', 'a%', "it's", 'null', 'NULL', ' lead']
BASE_DATE = datetime.date(2024, 1, 1)
HOT_KEY = 7


def k_value(r):
    roll = r.random()
    if roll < 0.06:
        return HOT_KEY
    if roll < 0.3:
        return r.randint(0, 20)
    return r.randint(-50, 250)


def j_value(r):
    roll = r.random()
    if roll < 0.5:
        return k_value(r)
    if roll < 0.75:
        return r.randint(-10 ** 10, 10 ** 10)
    return r.randint(0, 5000)


def d_value(r):
    if r.random() < 0.02:
        return r.choice([datetime.date(1999, 12, 31), datetime.date(2024, 2, 29)])
    return BASE_DATE + datetime.timedelta(days=r.randint(-45, 45))


def maybe_null(r, p, value):
    return None if r.random() < p else value


def rows(r, table_no):
    """The rows of one table: (id, k, j, s, v, d, p) tuples."""
    n = r.randint(1200, 2000)
    ids = list(range(table_no * 100000, table_no * 100000 + n))
    r.shuffle(ids)
    out = []
    for i in ids:
        k = maybe_null(r, 0.08, k_value(r))
        j = k if k is not None and r.random() < 0.1 else maybe_null(r, 0.06, j_value(r))
        s = maybe_null(r, 0.06, 'a' if r.random() < 0.15 else r.choice(STRINGS))
        v = maybe_null(r, 0.05, r.randint(-4000, 4000) * 0.25)
        out.append((i, k, j, s, v, maybe_null(r, 0.05, d_value(r)), maybe_null(r, 0.03, r.randint(0, 3))))
    return out


def literal(r, t):
    """A SQL literal of grammar type t, from the values the tables hold (mostly)."""
    if t == 'int':
        return str(k_value(r) if r.random() < 0.9 else r.randint(0, 3))
    if t == 'bigint':
        return str(j_value(r))
    if t in ('double', 'decimal'):
        return str(r.randint(-4000, 4000) * 0.25)
    if t == 'str':
        return quote(r.choice(STRINGS))
    return f"DATE '{d_value(r).isoformat()}'"


def quote(s):
    return "'" + s.replace("'", "''") + "'"


def sql_value(v):
    if v is None:
        return 'NULL'
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, datetime.date):
        return f"DATE '{v.isoformat()}'"
    return repr(v)


def values_sql(chunk):
    return ', '.join('(' + ', '.join(sql_value(v) for v in row) + ')' for row in chunk)


def column_list(engine):
    i = 0 if engine == 'bs' else 1
    return ', '.join(f'{n} {SQL_TYPES[t][i]}' for n, t in BASE_COLUMNS)


def chunks(seq, n):
    size = (len(seq) + n - 1) // n
    return [seq[i:i + size] for i in range(0, len(seq), size)]


def load(r, bs_conn, dk_conn):
    """Creates and fills every table in both engines; returns {name: row count}."""
    counts = {}
    names = ', '.join(n for n, _ in BASE_COLUMNS)
    for no, (name, (layout, writes)) in enumerate(TABLES.items()):
        data = rows(r, no + 1)
        counts[name] = len(data)
        with bs_conn.cursor() as cur:
            cur.execute(f'CREATE TABLE {name} ({column_list("bs")}) USING parquet {layout}')
            if writes == 'copy':
                with cur.copy(f'COPY {name} ({names}) FROM STDIN') as copy:
                    for row in data:
                        copy.write_row(row)
            else:
                for chunk in chunks(data, writes):
                    cur.execute(f'INSERT INTO {name} VALUES {values_sql(chunk)}')
            cur.execute(f'SELECT count(*) FROM {name}')
            got = cur.fetchone()[0]
            assert got == len(data), f'{name}: bucketsql holds {got} rows after loading {len(data)}'
        dk_conn.execute(f'CREATE TABLE {name} ({column_list("dk")})')
        for chunk in chunks(data, max(1, len(data) // 500)):
            dk_conn.execute(f'INSERT INTO {name} VALUES {values_sql(chunk)}')
    return counts
