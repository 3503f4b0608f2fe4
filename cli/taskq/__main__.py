from taskq.main import run

run()
