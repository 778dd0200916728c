"""ASK's host side: the wire format (``wire``), mappers (``mapper``), the reducer
(``reducer``), both as processes over real sockets (``run``) and PySpark's ReduceByKey
through the switch (``spark``)."""
