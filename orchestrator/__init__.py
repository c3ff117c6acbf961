"""Timer trigger (schedule: app setting DELTAEXTRAS_SCHEDULE): plan every configured table and send one
work message per partition that needs a rewrite. The logic is in deltaextras.dispatch."""

import azure.functions as func

from deltaextras.app.edges.functions import run_orchestrator


def main(timer: func.TimerRequest) -> None:
    run_orchestrator(timer)
