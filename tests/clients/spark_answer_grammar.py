"""Random Spark SQL for spark_answers.py: the tables both systems load, and queries in families
(arithmetic, decimals, dates, strings, casts, aggregates, set operations, windows, grouping
sets, subqueries), each built as a tree of expressions so that a failing query can be shrunk.

Every table has the same columns, one of each type the families need, and a layout of its own
(bucketed, partitioned, plain). `edges` holds the edges of each type: the largest and smallest
integers, NaN, -0.0, infinities, DECIMALs at their precision, the empty string.
"""
import datetime
import random
from decimal import Decimal

# (name, Spark DDL type, class): classes steer the grammar; `p` comes last, as Spark puts a
# partition column.
COLUMNS = [
    ('id', 'BIGINT', 'int'), ('k', 'INT', 'int'), ('ti', 'TINYINT', 'int'), ('si', 'SMALLINT', 'int'),
    ('i', 'INT', 'int'), ('bi', 'BIGINT', 'int'), ('d', 'DOUBLE', 'frac'), ('m', 'DECIMAL(10,2)', 'frac'),
    ('n', 'DECIMAL(20,6)', 'frac'), ('w', 'DECIMAL(38,4)', 'frac'), ('s', 'STRING', 'str'),
    ('t', 'STRING', 'str'), ('dt', 'DATE', 'date'), ('ts', 'TIMESTAMP', 'ts'), ('b', 'BOOLEAN', 'bool'),
    ('p', 'INT', 'int'),
]
TABLES = {
    'plain': '',
    'bucketed': 'CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS',
    'partitioned': 'PARTITIONED BY (p)',
    'edges': '',
}
STRINGS = ['', 'a', 'abc', 'Hello World', 'x-y_z', 'é', 'a b c', '12', ' 7 ', '-3', '1.5', '2024-03-05',
           'true', 'NULL', 'aaa', 'banana', "it's", 'ZED', '10000000']
NUMBER_TEXTS = ['12', ' 7 ', '-3', '1.5', '1e3', 'abc', '', '2147483648', '0', '-0', '3.99', 'NaN', 'Infinity']
DATE_TEXTS = ['2024-03-05', '2024-02-29', '2023-02-29', '1999-12-31', '2024-3-5', 'x', '2024-03-05 10:11:12']
DATE_PATTERNS = ['yyyy-MM-dd', 'yyyy-MM', 'dd/MM/yyyy', 'yyyyMMdd', 'MMM d, yyyy', 'EEE', 'E', 'D', 'HH:mm:ss',
                 'yyyy-MM-dd HH:mm', 'QQQ', 'u', 'a', 'hh']
EDGES = {
    'ti': [127, -128, 0], 'si': [32767, -32768, 1], 'i': [2147483647, -2147483648, -1],
    'bi': [9223372036854775807, -9223372036854775808, 2],
    'd': [float('nan'), -0.0, 0.0, float('inf'), float('-inf'), 1.7976931348623157e308, 4.9e-324, -float('nan')],
    'm': [Decimal('99999999.99'), Decimal('-99999999.99'), Decimal('0.01')],
    'n': [Decimal('99999999999999.999999'), Decimal('-0.000001')],
    'w': [Decimal('9999999999999999999999999999999999.9999'), Decimal('-1.0000')],
}


def rows(seed, table):
    """The rows of `table`, as Python values in COLUMNS' order."""
    r = random.Random(f'{seed}/{table}')
    out = []
    count = 12 if table == 'edges' else 60
    for n in range(count):
        row = {
            'id': n, 'k': r.choice([None, 1, 2, 3, 5, 8, 13, r.randint(-20, 40)]),
            'ti': r.randint(-20, 20), 'si': r.randint(-300, 300), 'i': r.randint(-1000, 1000),
            'bi': r.choice([r.randint(-10 ** 6, 10 ** 6), r.randint(-10 ** 12, 10 ** 12)]),
            'd': r.choice([r.randint(-400, 400) * 0.25, 0.0, -0.0, float('nan')]) if r.random() < 0.15
            else r.randint(-4000, 4000) * 0.25,
            'm': Decimal(r.randint(-100000, 100000)) / 100, 'n': Decimal(r.randint(-10 ** 9, 10 ** 9)) / 10 ** 6,
            'w': Decimal(r.randint(-10 ** 9, 10 ** 9)) / 10 ** 4, 's': r.choice(STRINGS),
            't': r.choice(STRINGS + NUMBER_TEXTS + DATE_TEXTS),
            'dt': datetime.date(2024, 1, 1) + datetime.timedelta(days=r.randint(-400, 400)),
            'ts': datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=r.randint(-10 ** 7, 10 ** 7)),
            'b': r.choice([True, False]), 'p': r.randint(0, 2),
        }
        if table == 'edges':
            for name, values in EDGES.items():
                row[name] = r.choice(values)
            if n < 2:
                row['dt'] = [datetime.date(1, 1, 1), datetime.date(9999, 12, 31)][n]
        for name, _, _ in COLUMNS:
            if name not in ('id', 'p') and r.random() < 0.07:
                row[name] = None
        out.append([row[name] for name, _, _ in COLUMNS])
    return out


def literal(value, sql_type):
    """`value` as a Spark SQL literal both systems read as `sql_type`."""
    if value is None:
        return f'CAST(NULL AS {sql_type})'
    if sql_type == 'STRING':
        return "'" + value.replace("'", "''") + "'"
    if sql_type == 'DATE':
        return f"DATE '{value.isoformat()}'"
    if sql_type == 'TIMESTAMP':
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if sql_type == 'BOOLEAN':
        return 'TRUE' if value else 'FALSE'
    if sql_type == 'DOUBLE':
        return f"CAST('{value!r}' AS DOUBLE)".replace("'nan'", "'NaN'").replace("'inf'", "'Infinity'") \
            .replace("'-inf'", "'-Infinity'")
    return f"CAST('{value}' AS {sql_type})"


def insert_statements(seed, table):
    types = [t for _, t, _ in COLUMNS]
    values = ', '.join('(' + ', '.join(literal(v, t) for v, t in zip(row, types)) + ')' for row in rows(seed, table))
    return f'INSERT INTO {table} VALUES {values}'


def create_statement(table):
    columns = ', '.join(f'{name} {t}' for name, t, _ in COLUMNS)
    return f'CREATE TABLE {table} ({columns}) USING parquet {TABLES[table]}'.rstrip()


class Node:
    """One expression: `template` with `{}` for each child, of class `cls`."""

    def __init__(self, template, cls, children=()):
        self.template = template
        self.cls = cls
        self.children = list(children)

    def sql(self):
        return self.template.format(*(c.sql() for c in self.children))

    def subtrees(self):
        yield self
        for c in self.children:
            yield from c.subtrees()


class Query:
    """`template` with `{}` for each expression in `exprs`; `family` names what it tests."""

    def __init__(self, family, template, exprs):
        self.family = family
        self.template = template
        self.exprs = exprs

    def sql(self):
        return self.template.format(*(e.sql() for e in self.exprs))

    def shrunk(self):
        """Smaller queries, each with one subexpression replaced by a smaller one of its class."""
        for i, expr in enumerate(self.exprs):
            for smaller in _smaller(expr):
                yield Query(self.family, self.template, self.exprs[:i] + [smaller] + self.exprs[i + 1:])


def _smaller(node):
    """Trees with one node replaced by one of its own descendants of the same class, or a
    condition by TRUE."""
    if node.cls == 'bool' and node.template != 'TRUE':
        yield Node('TRUE', 'bool')
    for sub in list(node.subtrees())[1:]:
        if sub.cls == node.cls or node.cls == 'any':
            yield sub
    for j, child in enumerate(node.children):
        for smaller in _smaller(child):
            yield Node(node.template, node.cls, node.children[:j] + [smaller] + node.children[j + 1:])


NUMERIC = ['ti', 'si', 'i', 'bi', 'd', 'm', 'n', 'w', 'k']
INT_LITERALS = ['0', '1', '2', '3', '-7', '10L', '3Y', '7S', '2147483647', '100000']
FRAC_LITERALS = ['2.5D', '1.5e0', '0.0D', '1.25', '-0.5', '2.5BD', '100.001', '0.1', '3.0']


class Generator:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def pick(self, seq):
        return self.r.choice(seq)

    def chance(self, p):
        return self.r.random() < p

    # Leaves.
    def column(self, cls):
        names = {'num': NUMERIC, 'int': ['ti', 'si', 'i', 'bi', 'k'], 'frac': ['d', 'm', 'n', 'w'],
                 'str': ['s', 't'], 'date': ['dt'], 'ts': ['ts'], 'bool': ['b']}[cls]
        return Node(self.pick(names), 'num' if cls in ('int', 'frac') else cls)

    def literal(self, cls):
        if cls == 'num':
            cls = self.pick(['int', 'frac'])
        options = {'int': INT_LITERALS, 'frac': FRAC_LITERALS,
                   'str': ["'" + s.replace("'", "''") + "'" for s in STRINGS],
                   'date': ["DATE '2024-03-05'", "DATE '2024-02-29'", "DATE '1999-12-31'"],
                   'ts': ["TIMESTAMP '2024-03-05 10:11:12'", "TIMESTAMP '2023-12-31 23:59:59.5'"],
                   'bool': ['TRUE', 'FALSE']}[cls]
        return Node(self.pick(options), 'num' if cls in ('int', 'frac') else cls)

    def leaf(self, cls):
        return self.column(cls) if self.chance(0.7) else self.literal(cls)

    # Expressions by class.
    def num(self, depth):
        if depth <= 0 or self.chance(0.3):
            return self.leaf('num')
        a, b = self.num(depth - 1), self.num(depth - 1)
        choice = self.r.randrange(14)
        if choice < 5:
            return Node('({} ' + self.pick(['+', '-', '*', '/', '%']) + ' {})', 'num', [a, b])
        return [
            lambda: Node('({} div {})', 'num', [a, b]),
            lambda: Node('(-{})', 'num', [a]),
            lambda: Node('abs({})', 'num', [a]),
            lambda: Node('pmod({}, {})', 'num', [a, b]),
            lambda: Node(self.pick(['try_add', 'try_subtract', 'try_multiply', 'try_divide']) + '({}, {})', 'num',
                         [a, b]),
            lambda: Node(self.pick(['round', 'bround']) + '({}, ' + self.pick(['0', '1', '2', '-1']) + ')', 'num', [a]),
            lambda: Node(self.pick(['ceil', 'floor', 'sign', 'sqrt', 'exp', 'ln']) + '({})', 'num', [a]),
            lambda: Node(self.pick(['greatest', 'least']) + '({}, {})', 'num', [a, b]),
            lambda: Node('CASE WHEN {} THEN {} ELSE {} END', 'num', [self.boolean(depth - 1), a, b]),
        ][choice - 5]()

    def decimal(self, depth):
        if depth <= 0 or self.chance(0.25):
            return Node(self.pick(['m', 'n', 'w', '1.25', '2.5BD', '0.001', 'CAST(k AS DECIMAL(5,1))',
                                   'CAST(i AS DECIMAL(12,2))', 'CAST(3 AS DECIMAL(12,2))']), 'num')
        a, b = self.decimal(depth - 1), self.decimal(depth - 1)
        return self.pick([
            lambda: Node('({} ' + self.pick(['+', '-', '*', '/', '%']) + ' {})', 'num', [a, b]),
            lambda: Node(self.pick(['round', 'bround']) + '({}, ' + self.pick(['0', '1', '3', '-1']) + ')', 'num', [a]),
            lambda: Node('({} ' + self.pick(['+', '*', '/']) + ' ' + self.pick(['i', 'bi', '3', 'd']) + ')', 'num',
                         [a]),
            lambda: Node(self.pick(['abs', 'ceil', 'floor', '-']) + '({})', 'num', [a]),
        ])()

    def string(self, depth):
        if depth <= 0 or self.chance(0.3):
            return self.leaf('str')
        a = self.string(depth - 1)
        n = self.pick(['0', '1', '2', '-3', '5', 'ti % 4'])
        return self.pick([
            lambda: Node(self.pick(['upper', 'lower', 'initcap', 'reverse', 'trim', 'ltrim', 'rtrim']) + '({})', 'str',
                         [a]),
            lambda: Node('substr({}, ' + n + ')', 'str', [a]),
            lambda: Node('substring({}, ' + n + ', ' + self.pick(['0', '1', '2', '4']) + ')', 'str', [a]),
            lambda: Node('concat({}, {})', 'str', [a, self.string(depth - 1)]),
            lambda: Node("concat_ws('-', {}, {})", 'str', [a, self.string(depth - 1)]),
            lambda: Node(self.pick(['lpad', 'rpad']) + '({}, ' + self.pick(['0', '3', '8']) + ", '*')", 'str', [a]),
            lambda: Node("replace({}, 'a', 'XY')", 'str', [a]),
            lambda: Node("translate({}, 'abc', 'xy')", 'str', [a]),
            lambda: Node("regexp_replace({}, '[aeiou]', '_')", 'str', [a]),
            lambda: Node("regexp_extract({}, '([a-z]+)', 1)", 'str', [a]),
            lambda: Node('repeat({}, 2)', 'str', [a]),
            lambda: Node(self.pick(['left', 'right']) + '({}, 2)', 'str', [a]),
            lambda: Node("format_string('%s|%d', {}, i)", 'str', [a]),
            lambda: Node('chr({})', 'str', [self.leaf('int')]),
            lambda: Node('space(abs(ti % 4))', 'str', []),
            lambda: Node('CAST({} AS STRING)', 'str', [self.any_scalar(depth - 1)]),
            lambda: Node("date_format({}, '" + self.pick(DATE_PATTERNS) + "')", 'str',
                         [self.pick([self.date, self.timestamp])(depth - 1)]),
            lambda: Node("from_unixtime({}, 'yyyy-MM-dd HH:mm:ss')", 'str', [Node('bi % 2000000000', 'num')]),
        ])()

    def string_number(self, depth):
        """Numbers read from strings."""
        a = self.string(depth - 1)
        return self.pick([
            lambda: Node('length({})', 'num', [a]),
            lambda: Node('ascii({})', 'num', [a]),
            lambda: Node("locate('a', {}" + self.pick(['', ', 2', ', 0']) + ')', 'num', [a]),
            lambda: Node("instr({}, 'b')", 'num', [a]),
        ])()

    def date(self, depth):
        if depth <= 0 or self.chance(0.3):
            return self.leaf('date')
        a = self.date(depth - 1)
        return self.pick([
            lambda: Node(self.pick(['date_add', 'date_sub']) + '({}, ' + self.pick(['1', '30', '-400', 'ti']) + ')',
                         'date', [a]),
            lambda: Node('add_months({}, ' + self.pick(['1', '-13', 'ti']) + ')', 'date', [a]),
            lambda: Node('last_day({})', 'date', [a]),
            lambda: Node("next_day({}, '" + self.pick(['Mon', 'SU', 'friday']) + "')", 'date', [a]),
            lambda: Node("trunc({}, '" + self.pick(['MM', 'YEAR', 'QUARTER', 'WEEK']) + "')", 'date', [a]),
            lambda: Node('to_date({})', 'date', [self.timestamp(depth - 1)]),
            lambda: Node("to_date(t, 'yyyy-MM-dd')", 'date', []),
            lambda: Node('CAST({} AS DATE)', 'date', [self.pick([self.timestamp, self.string])(depth - 1)]),
            lambda: Node('make_date(2024, ' + self.pick(['2', '13', 'abs(ti % 12) + 1']) + ', 29)', 'date', []),
        ])()

    def timestamp(self, depth):
        if depth <= 0 or self.chance(0.4):
            return self.leaf('ts')
        a = self.timestamp(depth - 1)
        return self.pick([
            lambda: Node("date_trunc('" + self.pick(['year', 'month', 'day', 'hour', 'week', 'quarter']) + "', {})",
                         'ts', [self.pick([a, self.date(depth - 1)])]),
            lambda: Node("to_timestamp(t, 'yyyy-MM-dd HH:mm:ss')", 'ts', []),
            lambda: Node('CAST({} AS TIMESTAMP)', 'ts', [self.date(depth - 1)]),
        ])()

    def date_number(self, depth):
        a = self.pick([self.date, self.timestamp])(depth - 1)
        return self.pick([
            lambda: Node(self.pick(['year', 'month', 'dayofmonth', 'day', 'dayofweek', 'dayofyear', 'weekofyear',
                                    'quarter']) + '({})', 'num', [a]),
            lambda: Node(self.pick(['hour', 'minute', 'second']) + '({})', 'num', [self.timestamp(depth - 1)]),
            lambda: Node('datediff({}, {})', 'num', [self.date(depth - 1), self.date(depth - 1)]),
            lambda: Node('months_between({}, {})', 'num', [self.timestamp(depth - 1), self.timestamp(depth - 1)]),
            lambda: Node('unix_timestamp({})', 'num', [self.timestamp(depth - 1)]),
        ])()

    def boolean(self, depth):
        if depth <= 0 or self.chance(0.2):
            return self.leaf('bool')
        return self.pick([
            lambda: Node('({} ' + self.pick(['=', '<', '>=', '<>', '<=>']) + ' {})', 'bool',
                         [self.num(depth - 1), self.num(depth - 1)]),
            lambda: Node('({} ' + self.pick(['=', '<', '>']) + ' {})', 'bool',
                         [self.string(depth - 1), self.string(depth - 1)]),
            lambda: Node('({} AND {})', 'bool', [self.boolean(depth - 1), self.boolean(depth - 1)]),
            lambda: Node('({} OR {})', 'bool', [self.boolean(depth - 1), self.boolean(depth - 1)]),
            lambda: Node('(NOT {})', 'bool', [self.boolean(depth - 1)]),
            lambda: Node('({} IS NULL)', 'bool', [self.num(depth - 1)]),
            lambda: Node('isnan({})', 'bool', [self.column('frac')]),
            lambda: Node("({} LIKE '" + self.pick(['a%', '%b%', '_', '%']) + "')", 'bool', [self.string(depth - 1)]),
            lambda: Node(self.pick(['startswith', 'endswith', 'contains']) + "({}, 'a')", 'bool',
                         [self.string(depth - 1)]),
            lambda: Node('({} IN (1, 2, 3, NULL))', 'bool', [self.num(depth - 1)]),
            lambda: Node('({} BETWEEN {} AND {})', 'bool', [self.date(depth - 1), self.date(0), self.date(0)]),
        ])()

    def cast(self, depth):
        target = self.pick(['TINYINT', 'SMALLINT', 'INT', 'BIGINT', 'DOUBLE', 'FLOAT', 'DECIMAL(10,2)', 'DECIMAL(5,0)',
                            'DECIMAL(38,18)', 'STRING', 'DATE', 'TIMESTAMP', 'BOOLEAN'])
        source = self.pick([
            lambda: self.num(depth - 1), lambda: self.column('str'),
            lambda: Node(self.pick(["'" + s + "'" for s in NUMBER_TEXTS + DATE_TEXTS]), 'str'),
            lambda: self.date(depth - 1), lambda: self.timestamp(depth - 1), lambda: self.leaf('bool'),
        ])()
        return Node(self.pick(['CAST', 'try_cast']) + '({} AS ' + target + ')', 'any', [source])

    def any_scalar(self, depth):
        return self.pick([self.num, self.string, self.date, self.timestamp, self.boolean])(depth)

    # Queries by family.
    def table(self):
        return self.pick(list(TABLES))

    def where(self):
        return ' WHERE {}' if self.chance(0.3) else ''

    def projection(self, family, make):
        items = [make() for _ in range(self.r.randint(1, 3))]
        # One node holds the select list, so that shrinking can keep any single item of it.
        exprs = [Node(', '.join('{}' for _ in items), 'any', items)]
        where = self.where()
        if where:
            exprs.append(self.boolean(1))
        return Query(family, f'SELECT id, {{}} FROM {self.table()}{where}', exprs)

    def query(self):
        family = self.pick(['arithmetic', 'arithmetic', 'decimals', 'dates', 'strings', 'strings', 'casts', 'casts',
                            'aggregates', 'set-operations', 'windows', 'grouping-sets', 'subqueries'])
        depth = self.r.randint(1, 3)
        if family == 'arithmetic':
            return self.projection(family, lambda: self.pick([self.num, self.string_number])(depth))
        if family == 'decimals':
            return self.projection(family, lambda: self.decimal(depth))
        if family == 'dates':
            return self.projection(family, lambda: self.pick([self.date, self.timestamp, self.date_number])(depth))
        if family == 'strings':
            return self.projection(family, lambda: self.pick([self.string, self.string_number, self.boolean])(depth))
        if family == 'casts':
            return self.projection(family, lambda: self.cast(depth))
        return getattr(self, family.replace('-', '_'))(depth)

    def aggregates(self, depth):
        x, y = self.num(depth - 1), self.num(depth - 1)
        agg = self.pick([
            'sum({})', 'avg({})', 'min({})', 'max({})', 'count({})', 'count(DISTINCT {})', 'sum(DISTINCT {})',
            'stddev({})', 'stddev_pop({})', 'variance({})', 'var_pop({})', 'percentile({}, 0.5)',
            'percentile_approx({}, 0.5)', 'approx_count_distinct({})', 'sort_array(collect_set({}))',
            'count_if({} > 0)', 'bool_and({} > 0)', 'bool_or({} > 0)', 'every({} > 0)',
            'some({} > 0)', 'any({} > 0)', 'max_by({}, id)', 'min_by({}, id)', 'corr({}, d)', 'covar_pop({}, i)',
            'covar_samp({}, m)', 'kurtosis({})', 'skewness({})', 'median({})',
        ])
        key = self.pick(['p', 'k', 'b', 'ti % 3', 's', 'year(dt)'])
        template = f'SELECT {key} AS g, {agg}, {{}} FROM {self.table()} GROUP BY {key}'
        if self.chance(0.3):
            template += ' HAVING count(*) > 1'
        return Query('aggregates', template, [x, Node(self.pick(['count(*)', 'sum(i)', 'avg(m)', 'max(s)', 'min(dt)']),
                                                      'any')])

    def set_operations(self, depth):
        op = self.pick(['UNION ALL', 'UNION', 'INTERSECT', 'INTERSECT ALL', 'EXCEPT', 'EXCEPT ALL', 'MINUS',
                        'MINUS ALL'])
        cls = self.pick(['num', 'str', 'date'])
        left = self.column(cls) if cls != 'num' else self.pick([self.column('num'), self.num(1)])
        right = self.column(cls) if cls != 'num' else self.pick([self.column('num'), self.num(1)])
        template = (f'SELECT k % 5, {{}} FROM {self.table()} WHERE id % 3 <> 0 {op} '
                    f'SELECT k % 5, {{}} FROM {self.table()} WHERE id % 2 = 0')
        if self.chance(0.2):
            template = f'SELECT {{}} FROM {self.table()} {op} SELECT {{}} FROM {self.table()} WHERE b'
        return Query('set-operations', template, [left, right])

    def windows(self, depth):
        fn = self.pick([
            'sum({})', 'avg({})', 'min({})', 'max({})', 'count({})', 'first_value({})', 'last_value({})',
        ])
        ranking = self.pick(['row_number()', 'rank()', 'dense_rank()', 'percent_rank()', 'cume_dist()', 'ntile(3)',
                             'lag({}, 1)', 'lead({}, 2, 0)'])
        lo = self.pick(['UNBOUNDED PRECEDING', '2 PRECEDING', 'CURRENT ROW', '1 FOLLOWING'])
        hi = self.pick(['UNBOUNDED FOLLOWING', '3 FOLLOWING', 'CURRENT ROW'])
        if lo == '1 FOLLOWING' and hi == 'CURRENT ROW':
            hi = '3 FOLLOWING'
        frame = self.pick(['', f' ROWS BETWEEN {lo} AND {hi}', f' ROWS BETWEEN {lo} AND {hi}',
                           ' RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW'])
        partition = self.pick(['p', 'k', 'b', 'ti % 2'])
        over = f'OVER (PARTITION BY {partition} ORDER BY id{frame})'
        use_ranking = self.chance(0.4)
        text = ranking if use_ranking else fn
        over = f'OVER (PARTITION BY {partition} ORDER BY id)' if use_ranking else over
        exprs = [self.num(depth - 1)] if '{}' in text else []
        return Query('windows', f'SELECT id, {text} {over} FROM {self.table()}', exprs)

    def grouping_sets(self, depth):
        a, b = self.pick([('p', 'b'), ('k % 3', 'ti % 2'), ('s', 'p'), ('year(dt)', 'b')])
        grouping = self.pick([f'ROLLUP({a}, {b})', f'CUBE({a}, {b})', f'GROUPING SETS (({a}), ({b}), ())',
                              f'GROUPING SETS (({a}, {b}), ({a}))'])
        extra = self.pick(['grouping({a})', 'grouping_id()', 'grouping_id({a}, {b})', 'count(*)'])
        template = f'SELECT {a}, {b}, sum({{}}), {extra.format(a=a, b=b)} FROM {self.table()} GROUP BY {grouping}'
        return Query('grouping-sets', template, [self.num(depth - 1)])

    def subqueries(self, depth):
        inner = self.table()
        return Query('subqueries', self.pick([
            f'SELECT id, {{}} FROM {self.table()} o WHERE k IN (SELECT k FROM {inner} WHERE {{}})',
            f'SELECT id, {{}} FROM {self.table()} o WHERE k NOT IN (SELECT k FROM {inner} WHERE {{}})',
            f'SELECT id, {{}} FROM {self.table()} o WHERE EXISTS (SELECT 1 FROM {inner} x WHERE x.k = o.k AND {{}})',
            f'SELECT id, {{}}, (SELECT max(i) FROM {inner} x WHERE x.k = o.k AND {{}}) FROM {self.table()} o',
            f'SELECT id, {{}} FROM {self.table()} o WHERE (k, p) IN (SELECT k, p FROM {inner} WHERE {{}})',
        ]), [self.num(depth - 1), self.boolean(1)])
