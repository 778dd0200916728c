"""Routes of switches: which the controller owns, and who holds which part of their memory."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from controller.api.context import ApiContext, context

router = APIRouter(tags=["switches"])
Ctx = Annotated[ApiContext, Depends(context)]


@router.get("/switches")
async def switches(ctx: Ctx) -> dict[str, Any]:
    """The switches and whether this controller is their primary client."""
    return {
        "switches": [
            {
                "device_id": c.spec.device_id,
                "name": c.spec.label,
                "address": c.spec.address,
                "connected": c.connected,
                "primary": c.is_primary,
            }
            for c in ctx.switches
        ]
    }


@router.get("/memory")
async def memory(ctx: Ctx) -> dict[str, Any]:
    """Per switch and memory pool: size, free units, and every segment with its owner; and
    ATP's shared pool as the switch sees it (``atp_pool``: aggregators held now, claims,
    collisions, fallbacks, releases), when the switch can be read."""
    from controller.p4rt.p4runtime_client import SwitchError
    from controller.systems.atp import pool_stats

    view = ctx.manager.memory_view()
    conns = {c.spec.device_id: c for c in ctx.switches}
    for entry in view:
        conn = conns.get(entry["device_id"])
        if conn is None or not conn.connected:
            continue
        try:
            entry["atp_pool"] = await pool_stats(conn)
        except SwitchError:
            pass  # a program without ATP, or the switch went away: no figures
    return {"switches": view}
