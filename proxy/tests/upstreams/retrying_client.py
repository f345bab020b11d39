#!/usr/bin/env python3
"""An HTTP client that retries by itself, as agent frameworks' clients do: urllib3 with its
own Retry policy, POST included, and a read timeout shorter than the tool takes.

    retrying_client.py URL SESSION JSON

Prints one line of JSON: the final status, body and headers, and how many attempts urllib3
made (its retry history). Exit 0 once it has an answer; 2 if every attempt failed.
"""

import json
import sys

import urllib3
from urllib3.util import Retry, Timeout


def main():
    url, session, body = sys.argv[1], sys.argv[2], sys.argv[3]
    retry = Retry(
        total=20,
        read=20,
        connect=3,
        allowed_methods=None,  # retry every method, POST included
        status_forcelist=[502, 503, 504],
        backoff_factor=0.05,
        respect_retry_after_header=False,
        raise_on_status=False,
    )
    http = urllib3.PoolManager(retries=retry, timeout=Timeout(connect=2.0, read=0.4))
    try:
        response = http.request(
            "POST",
            url,
            body=body.encode(),
            headers={"content-type": "application/json", "x-session-id": session},
        )
    except urllib3.exceptions.HTTPError as error:
        print(json.dumps({"error": str(error)}), flush=True)
        return 2
    history = response.retries.history if response.retries else ()
    print(
        json.dumps(
            {
                "status": response.status,
                "body": response.data.decode(),
                "replayed": response.headers.get("idempotent-replayed"),
                "attempts": len(history) + 1,
                "history": [str(entry.error) for entry in history],
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
